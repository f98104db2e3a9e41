"""The spot market every lab and workload shares: price traces replayed with time compressed
(`trace`), the DOLL paper's preemption model (`preemption`) and the one billing meter
(`billing`)."""
