"""The fault proxy's delivery schedule (bcnp/host/proxy/core/delivery.py) on a made-up clock: no sockets.

Each case says what arrived when and checks what falls due when, so the proxy's rules
(order, bandwidth, latency, link drops, resets, the script) are pinned to the microsecond
without a thread or a real network."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bcnp.host.proxy.core.delivery import DeliverySchedule
from bcnp.host.proxy.core.faults import Faults, Partition, Reset, SetFaults


@dataclass(eq=False)
class Item:
    name: str
    size: int = 100
    datagram: bool = False
    closed: bool = False

    def dead(self) -> bool:
        return self.closed


def names(items: list[Item]) -> list[str]:
    return [item.name for item in items]


def test_latency_and_a_bandwidth_cap_set_when_each_chunk_arrives_and_order_is_kept() -> None:
    faults = Faults(latency=0.010, bandwidth=80_000)  # 100 bytes take 10 ms on the wire
    schedule: DeliverySchedule[Item] = DeliverySchedule(faults, Faults())
    first = schedule.stream(Item("a"), "up", now=1.0, not_before=0.0)
    second = schedule.stream(Item("b"), "up", now=1.0, not_before=first)
    assert (first, second) == (pytest.approx(1.020), pytest.approx(1.030))  # queued behind "a"
    assert schedule.due(1.019) == [] and names(schedule.due(1.020)) == ["a"]
    assert schedule.wait(1.020, longest=1.0) == pytest.approx(0.010)
    assert names(schedule.due(2.0)) == ["b"]
    # The other direction has its own faults and its own share of the link.
    assert schedule.stream(Item("c"), "down", now=1.0, not_before=0.0) == 1.0


def test_jitter_is_seeded_so_a_run_repeats() -> None:
    def arrivals(seed: int) -> list[float]:
        schedule: DeliverySchedule[Item] = DeliverySchedule(
            Faults(latency=0.05, jitter=0.02), Faults(), seed=seed
        )
        return [schedule.arrival("up", 10, now=0.0) for _ in range(20)]

    assert arrivals(7) == arrivals(7) != arrivals(8)
    assert all(0.03 <= t <= 0.07 for t in arrivals(7))


def test_a_link_drop_holds_chunks_drops_datagrams_and_hands_back_in_order() -> None:
    schedule: DeliverySchedule[Item] = DeliverySchedule(Faults(latency=0.01), Faults(latency=0.01))
    assert schedule.partition(at=0.0, seconds=1.0)
    assert not schedule.partition(at=0.5, seconds=0.2)  # a shorter cut does not shorten it
    schedule.stream(Item("a"), "up", 0.1, 0.0)
    schedule.stream(Item("b"), "up", 0.2, 0.0)
    assert schedule.datagram(lambda: Item("u", datagram=True), "down", 0.2, 100) == 0  # lost at once
    closed = Item("gone")
    schedule.stream(closed, "up", 0.3, 0.0)
    closed.closed = True  # its connection went before the link came back: nothing to hand back
    assert schedule.due(0.9) == [] and schedule.bytes_held == 200 and schedule.udp_dropped == 1
    assert not schedule.heal_due(0.99) and schedule.heal_due(1.0)
    healed = schedule.heal()
    assert healed is not None and names(healed[0]) == ["a", "b"] and healed[1] == 200
    assert schedule.heal() is None and not schedule.partitioned


def test_udp_hold_keeps_datagrams_and_a_reset_drops_everything_held() -> None:
    schedule: DeliverySchedule[Item] = DeliverySchedule(Faults(), Faults(), udp_hold=True)
    schedule.partition(at=0.0, seconds=None)  # until healed
    assert schedule.datagram(lambda: Item("u", datagram=True), "up", 0.1, 100) == 1
    schedule.stream(Item("a"), "up", 0.1, 0.0)
    assert schedule.due(0.2) == [] and schedule.bytes_held == 200
    assert not schedule.heal_due(100.0)  # no end was set
    schedule.reset()
    assert schedule.held == [] and schedule.bytes_held == 0 and schedule.udp_dropped == 1


def test_held_datagrams_leave_a_drop_in_another_order_with_reorder_held() -> None:
    """A radio emptying its buffer: each held datagram gets the latency and jitter again
    from the heal, so a handshake sent late in the drop can overtake a command sent early.
    A stream's bytes still come back at once and in order."""
    faults = Faults(latency=0.010, jitter=0.030)
    schedule: DeliverySchedule[Item] = DeliverySchedule(faults, faults, seed=3, reorder_held=True)
    assert schedule.udp_hold
    schedule.partition(at=0.0, seconds=1.0)
    sent = [f"d{n}" for n in range(12)]
    for n, name in enumerate(sent):
        schedule.datagram(lambda name=name: Item(name, datagram=True), "up", 0.1 + 0.02 * n, 10)
    schedule.stream(Item("a"), "up", 0.5, 0.0)
    assert schedule.due(0.99) == [] and len(schedule.held) == 13
    healed = schedule.heal(1.0)
    assert healed is not None and names(healed[0]) == ["a"]
    assert schedule.due(1.0 - 1e-9) == []  # nothing before the heal
    out = names(schedule.due(1.0 + 0.040))  # latency + jitter: all of them by then
    assert sorted(out) == sorted(sent) and out != sent


def test_loss_duplication_and_reordering_of_datagrams() -> None:
    schedule: DeliverySchedule[Item] = DeliverySchedule(Faults(duplicate=1.0, reorder=1.0), Faults(loss=1.0))
    made: list[Item] = []

    def make() -> Item:
        made.append(Item(f"d{len(made)}", datagram=True))
        return made[-1]

    assert schedule.datagram(make, "up", 0.0, 10) == 2  # duplicated, both held back by the reorder delay
    assert schedule.udp_duplicated == 1 and schedule.udp_reordered == 2
    assert schedule.due(0.004) == [] and names(schedule.due(0.005)) == ["d0", "d1"]
    assert schedule.datagram(make, "down", 0.0, 10) == 0 and schedule.udp_dropped == 1


def test_the_script_falls_due_from_the_start_and_new_faults_apply_to_what_arrives_next() -> None:
    script = [(2.0, Reset()), (1.0, Partition(0.5)), (1.5, SetFaults(latency=0.1, direction="up"))]
    schedule: DeliverySchedule[Item] = DeliverySchedule(Faults(), Faults(), script=script)
    schedule.start = 10.0
    assert schedule.wait(10.0, longest=5.0) == 1.0  # the first event
    assert schedule.script_due(10.9) == []
    assert schedule.script_due(11.6) == [
        (11.0, Partition(0.5)),
        (11.5, SetFaults(latency=0.1, direction="up")),
    ]
    event = SetFaults(latency=0.1, direction="up")
    schedule.set_faults(event)
    assert schedule.faults["up"] == Faults(latency=0.1) and schedule.faults["down"] == Faults()
    assert schedule.script_due(12.0) == [(12.0, Reset())]
    with pytest.raises(ValueError, match="script"):
        DeliverySchedule(Faults(), Faults(), script=[(-1.0, Reset())])
