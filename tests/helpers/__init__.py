"""Helpers shared by the tests: real processes (Ray head, moto_server, fake CLIs on PATH),
lab checks, seed-format profiles, result readers. Tests import from here, never from a
conftest.py or another test module."""
