"""Every database transition of a job lives in this package and nowhere else."""
