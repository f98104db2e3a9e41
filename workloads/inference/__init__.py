"""The inference cluster (after the original multi-model inference service): a coordinator actor
that splits each job's test set into sub-jobs, gives spot workers to running jobs by fair share, and
merges every sub-job's answers exactly once, surviving the loss of workers and of itself (state in
the run's file store)."""
