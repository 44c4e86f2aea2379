"""The banks serve the most urgent burst first (npu_sim.banks.BankSchedule): a burst goes
ahead of booked work that can wait, and queues behind work that cannot."""
import dataclasses
import random

import pytest

from npu_sim import api
from npu_sim.banks import BankSchedule
from npu_sim.isa.commands import DmaCopy, DmaFill, dense
from npu_sim.isa.program import Layer, Program
from npu_sim.simulator import Machine


def test_a_burst_goes_ahead_of_work_that_can_wait():
    banks = BankSchedule(2)
    assert banks.book((0,), 0, 10, 40) == 10      # 30 cycles to spare within its burst
    assert banks.book((0,), 5, 20, 20) == 25      # ahead of it: its work now ends at 30
    assert banks.free[0] == 30 and banks.slack[0] == 0
    assert banks.book((0,), 6, 5, 50) == 35       # nothing may wait now: behind it


def test_work_put_off_has_less_to_spare():
    banks = BankSchedule(1)
    banks.book((0,), 0, 10, 40)                    # ends by 10, may end by 40
    assert banks.book((0,), 0, 20, 100) == 20      # ahead: the first now ends at 30
    assert banks.book((0,), 0, 20, 100) == 50      # ahead again, it would end at 50: behind


def test_a_burst_waits_for_every_bank_it_touches():
    banks = BankSchedule(2)
    banks.book((1,), 0, 100, 100)                  # bank 1 busy, with no cycle to spare
    assert banks.book((0, 1), 10, 10, 80) == 110
    assert banks.free == [110, 110]
    # its work ends at 110, past its burst's 90: nothing goes ahead of it
    assert banks.book((0,), 20, 5, 200) == 115
    assert banks.book((0,), 200, 7, 7) == 207      # idle again


def _served_by_priority(work: list[tuple[int, int, int]]) -> dict[int, int]:
    """An exact bank: (release, cycles, priority) of each burst's work, the highest
    priority served first, preempting; when each one's work ends."""
    order = sorted(range(len(work)), key=lambda j: work[j][0])
    left = {j: work[j][1] for j in order}
    ends, now, waiting, nxt = {}, 0, [], 0
    while nxt < len(order) or waiting:
        if not waiting:
            now = max(now, work[order[nxt]][0])
        while nxt < len(order) and work[order[nxt]][0] <= now:
            waiting.append(order[nxt])
            nxt += 1
        top = max(waiting, key=lambda j: work[j][2])
        arrival = work[order[nxt]][0] if nxt < len(order) else now + left[top]
        run = min(left[top], arrival - now)
        now += run
        left[top] -= run
        if not left[top]:
            ends[top] = now
            waiting.remove(top)
    return ends


@pytest.mark.parametrize("seed", range(4))
def test_no_booked_work_is_put_off_past_its_burst(seed):
    # Random bursts in time order (as the engines book them) on 1-4 banks, replayed on exact
    # banks: a burst that went ahead outranks all the work booked before it, one that queued
    # ranks below it. Every burst's work on every bank ends by the end its engine took, the
    # later of its burst's end and what book() returned.
    rng = random.Random(seed)
    n_banks = 1 + seed
    schedule, t, ahead = BankSchedule(n_banks), 0, 0
    per_bank, deadline = [[] for _ in range(n_banks)], []
    for j in range(300):
        t += rng.choice((0, rng.randrange(0, 30), rng.randrange(0, 150)))
        touched = tuple(sorted(rng.sample(range(n_banks), rng.randrange(1, n_banks + 1))))
        cycles, length = rng.randrange(1, 60), rng.randrange(1, 200)
        busy = [k for k in touched if schedule.free[k] > t]
        served = schedule.book(touched, t, cycles, length)
        went_ahead = served == t + cycles
        ahead += bool(went_ahead and busy)
        for k in touched:
            per_bank[k].append((t, cycles, j if went_ahead else -j, j))
        deadline.append(max(t + length, served))
    for work in per_bank:
        ends = _served_by_priority([w[:3] for w in work])
        for i, (_, _, _, j) in enumerate(work):
            assert ends[i] <= deadline[j]
    assert ahead >= 10                  # the case the test is about


def _run(cmds, cfg):
    program = Program(["dram"], [1 << 20, 1 << 20], cmds, [], [], [], [Layer("x", ["COPY"], "dma")])
    return Machine(program, cfg).run(compute_values=False)


@pytest.mark.parametrize("bank_rate,waits", [(64, False), (16, True)])
def test_a_short_copy_beside_a_long_load_on_one_bank(bank_rate, waits):
    # A 64 KiB load from DRAM (16 B/cycle) needs a quarter of the one bank's cycles at 64 B a
    # cycle: an 8 KiB on-chip copy started during it takes the cycles it leaves, and neither
    # takes longer than alone. At 16 B a cycle the load needs every bank cycle: the copy
    # waits for its burst's share.
    cfg = api.load_config("default").with_overrides({"sram.banks": 1,
                                                     "sram.bytes_per_cycle": bank_rate})
    load = DmaCopy(id=0, layer=0, channel=0, src=dense(1, 0, (64, 1024), "int8"),
                   dst=dense(0, 0, (64, 1024), "int8"))
    fill = DmaFill(id=1, layer=0, channel=1, dst=dense(0, 1 << 18, (64, 64), "int8"), value=0)
    copy = DmaCopy(id=2, layer=0, channel=1, src=dense(0, 1 << 17, (4, 1024), "int8"),
                   dst=dense(0, 3 << 17, (4, 1024), "int8"))
    load_alone = _run([load], cfg).end[0]
    copy_alone = _run([dataclasses.replace(fill, id=0), dataclasses.replace(copy, id=1)], cfg).end[1]
    sim = _run([load, fill, copy], cfg)
    assert sim.start[2] < sim.end[0]                   # during the load
    if waits:
        assert sim.end[2] > copy_alone + 1000
    else:
        assert (sim.end[0], sim.end[2]) == (load_alone, copy_alone)
