"""Ports for lab nodes come from outside the kernel's automatic range, free on every address,
never one handed out meanwhile."""

from __future__ import annotations

import socket

import pytest

from netem import ports


def test_ports_are_free_and_outside_the_range_the_kernel_hands_out_by_itself() -> None:
    low, high = ports.automatic_range()
    chosen = ports.free_local_ports(40)
    assert len(set(chosen)) == 40
    for port in chosen:
        assert not low <= port <= high and port >= 1024
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_bound_port_or_one_handed_out_meanwhile_is_never_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as held, socket.socket() as other:
        held.bind(("127.0.0.1", 0))  # bound on loopback only: a node binding it widely fails
        other.bind(("127.0.0.1", 0))
        bound, taken = held.getsockname()[1], other.getsockname()[1]
    with socket.socket() as held:
        held.bind(("127.0.0.1", bound))
        free = ports.free_local_port()
        monkeypatch.setattr(ports, "chosen_range", lambda: [bound, taken, free])
        assert ports.free_local_ports(1, {taken}) == [free]
        monkeypatch.setattr(ports, "chosen_range", lambda: [bound, taken])
        with pytest.raises(OSError, match="fewer than 1 free TCP ports"):
            ports.free_local_ports(1, {taken})
