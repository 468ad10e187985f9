"""The one base class of errors of the user's making (bad config, missing or malformed input, a store that
does not match). ``bertology`` prints them as one line that names the problem and the fix; anything
else is a bug and keeps its traceback."""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and how to fix it."""
