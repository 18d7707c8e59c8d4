"""The guest profiler's report (Host.profile): where a callback's own
functions spent their work, as libcallbox returns it (callbox_profile's
JSON summary, the fields of Go's host.GuestProfile)."""

from typing import Any, Dict, List, NamedTuple

from .errors import Frame


class ProfileWork(NamedTuple):
    """Work charged to a guest function: fuel units (wasm instructions,
    plus bulk rates), wall time in seconds (the profiler's own cost per
    guest call included) and the times it was entered."""

    fuel: int
    wall: float
    calls: int


class ProfileFunction(NamedTuple):
    """One guest function in a Profile: frame names it (offset: its body's
    first byte; file and line: its first source line, where the module has
    DWARF); self is the work in the function, total with what it called."""

    frame: Frame
    self: ProfileWork
    total: ProfileWork


class Profile(NamedTuple):
    """Where a callback's guest spent its work over some calls
    (Host.profile), as the library reports it."""

    callback: str
    engine: str
    calls: int
    failed: int
    elapsed: float
    functions: List[ProfileFunction]

    @staticmethod
    def from_json(d: Dict[str, Any]) -> "Profile":
        def work(w: Dict[str, Any]) -> ProfileWork:
            return ProfileWork(w["fuel"], w["nanos"] / 1e9, w["calls"])

        fns = []
        for f in d.get("functions") or []:
            fr = f["frame"]
            frame = Frame(fr.get("func", ""), fr.get("module", ""), fr.get("file", ""), fr.get("line", 0),
                          fr.get("column", 0), fr.get("func_index", 0), fr.get("offset", 0))
            fns.append(ProfileFunction(frame, work(f["self"]), work(f["total"])))
        return Profile(d["callback"], d["engine"], d["calls"], d["failed"], d["elapsed"] / 1e9, fns)

    def function(self, name: str) -> ProfileFunction:
        """The function named name (KeyError when the profile has none)."""
        for f in self.functions:
            if f.frame.func == name:
                return f
        raise KeyError(name)
