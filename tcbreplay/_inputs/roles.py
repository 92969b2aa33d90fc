"""Tool roles as tool schemas declare them: what a tool does to the world it acts on."""

from __future__ import annotations

from typing import Any

from tcbreplay.errors import ToolSchemaError

# write: changes state; read: looks it up; scratch: thinking or arithmetic with no effect
ROLES = ("write", "read", "scratch")


def check_role(role: Any, place: str) -> str | None:
    """A tool's ``role`` (None: none), refused naming ``place`` unless one of ROLES."""
    if role is None:
        return None
    if not isinstance(role, str) or role not in ROLES:
        raise ToolSchemaError(
            f"{place}: role {role!r}: choose one of {', '.join(ROLES)} (or leave it out)"
        )
    return role
