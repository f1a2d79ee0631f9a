"""What a trained run leaves behind for people and robots: exported policies and critics (``export``,
``export_critic``), ONNX deployment (``deploy``), videos (``video``), learning-curve figures
(``plotting``) and action-distribution plots (``action_plot``)."""
