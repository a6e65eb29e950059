"""agui_state.asgi's lifecycle (protocol/README.md §14, the middleware's states): exactly the moves of the
protocol's table, and an event that does not apply in a phase leaves it as it is."""
from __future__ import annotations

from agui_state._lifecycle import Event, Lifecycle, Phase

W, R, P, D, E = Phase.WAITING, Phase.REPAIRING, Phase.PASSING, Phase.DETACHED, Phase.ENDED
MOVES = {
    (W, Event.OPENED): R, (W, Event.PASSED): P, (W, Event.ENDED): E,  # the head; or no head at all
    (R, Event.PASSED): P, (R, Event.LEFT): D, (R, Event.ENDED): E,    # fail open; detached; end, break, cancel
    (P, Event.ENDED): E, (D, Event.ENDED): E,
}


def test_every_phase_moves_only_as_the_protocol_table_says() -> None:
    for phase in Phase:
        for event in Event:
            life = Lifecycle()
            life.phase = phase
            moved = life.on(event)
            assert (moved, life.phase) == ((phase, event) in MOVES, MOVES.get((phase, event), phase)), (phase, event)
    # A response's whole life: repaired, its client gone, the run cancelled; nothing moves it after that.
    life = Lifecycle()
    assert [life.on(e) for e in (Event.OPENED, Event.LEFT, Event.PASSED, Event.ENDED, Event.ENDED)] == \
        [True, True, False, True, False]
    assert life.phase is E and not life.writing
