"""Run plumbing: what a run stands on, below the training loop. Atomic, verified checkpoints
(``checkpoint``), run records and the one codec of configs and arrays to JSON (``records``), the cache
of traced programs (``program_cache``) and the device mesh the environment batch is split over
(``sharding``)."""
