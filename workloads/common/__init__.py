"""What every workload shares: data access, the results writer, provenance, connecting to Ray."""
