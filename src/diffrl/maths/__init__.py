"""Algorithm maths: the estimators, losses and data structures that algorithms are built from, free of
any run machinery. Return estimators (``returns``: GAE, soft TD(lambda)), the trust-region duals
(``trust_region``), reciprocal adjoint matching (``adjoint_matching``, AMDP arXiv 2606.22630), running
observation statistics (``normalization``), the replay buffer of the off-policy algorithms (``replay``)
and the statistics that summarise seeds (``stats``: bootstrap intervals, IQM).

Ground floor: these modules import nothing of diffrl's above them (tests/test_import_graph.py), except
that adjoint matching reads the reference SDE of the adjoint policy (``diffrl.policies.reference_sde``)."""
