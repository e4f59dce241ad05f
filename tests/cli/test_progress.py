"""Phases longer than two seconds are said on standard error, quick ones are not (issue 27)."""

from __future__ import annotations

from tuiprof.progress import Phase, SlowPhases


def test_slow_phases_speak_after_two_seconds_then_every_ten() -> None:
    now = [0.0]
    said: list[str] = []
    slow = SlowPhases(said.append, clock=lambda: now[0], tick=3600)  # the test polls, not the thread
    try:
        slow.set("loading a.tptrace")
        now[0] = 1.9
        slow.poll()
        slow.set("simulating", "0/64 trials")       # the quick phase never spoke
        now[0] = 3.8
        slow.poll()
        assert said == []
        now[0] = 4.0
        slow.poll()
        slow.poll()
        assert said == ["tuiprof: simulating: 0/64 trials..."]
        slow.set("simulating", "40/64 trials")      # progress does not restart the phase's clock
        now[0] = 13.9
        slow.poll()
        now[0] = 14.0
        slow.poll()
        assert said[-1] == "tuiprof: simulating: 40/64 trials (12 s)"
        slow.phase(Phase("emulating launch 1", 3, 8, "CTAs"))
        now[0] = 16.1
        slow.poll()
        assert said[-1] == "tuiprof: emulating launch 1: 3/8 CTAs..." and len(said) == 3
    finally:
        slow.close()


def test_slow_phases_say_nothing_to_a_pipe(capsys) -> None:
    """Standard error that is not a terminal (a script, a test) gets no progress lines: a failure
    stays one `error:` line and one `hint:` line."""
    slow = SlowPhases.on_stderr()
    try:
        slow.set("simulating")
        slow._since -= 60
        slow.poll()
    finally:
        slow.close()
    assert capsys.readouterr().err == ""
