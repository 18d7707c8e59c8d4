"""The parameters of a callback's signature text (abi/ABI.md, section 5).

Only what the package needs to convert arguments: each parameter's name
(or "") and dtype name. Result types, dimensions and their binding are the
library's business (callbox_output_types); a signature this parser does
not follow gives None, and the arguments go to the library unconverted,
which then checks them itself.

    signature := params "->" results
    params    := "(" [ param { "," param } ] ")"
    param     := [ ident ":" ] type
    type      := dtype "[" [ dim { "," dim } ] "]"
    dim       := digits | ident
"""

import re
from typing import List, NamedTuple, Optional

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PARAM = re.compile(r"\s*(?:(%s)\s*:\s*)?(%s)\s*\[\s*((?:[A-Za-z0-9_]+\s*(?:,\s*[A-Za-z0-9_]+\s*)*)?)\]\s*"
                    % (_IDENT, _IDENT))


class Param(NamedTuple):
    """One parameter: its name ("" when the signature gives none), its dtype
    name ("f32") and its rank."""

    name: str
    dtype: str
    rank: int


def params(signature: str) -> Optional[List[Param]]:
    """The parameters of signature text such as "(x: f32[n], eps: f32[]) ->
    f32[n]", or None when it does not follow the grammar."""
    s = signature.strip()
    if not s.startswith("("):
        return None
    i = 1
    out: List[Param] = []
    if re.match(r"\s*\)", s[i:]):
        i = s.index(")", i) + 1
    else:
        while True:
            m = _PARAM.match(s, i)
            if m is None:
                return None
            dims = m.group(3).strip()
            out.append(Param(m.group(1) or "", m.group(2), len(dims.split(",")) if dims else 0))
            i = m.end()
            if s.startswith(",", i):
                i += 1
                continue
            if s.startswith(")", i):
                i += 1
                break
            return None
    if not s[i:].lstrip().startswith("->"):
        return None
    return out
