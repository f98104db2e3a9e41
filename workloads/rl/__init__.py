"""Distributed RL on spot: RLlib SAC with its learner on an on-demand node and its env runners
on spot nodes."""
