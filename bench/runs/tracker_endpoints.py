"""Whether the servers the trackers send to answer, asked once before the runs (`answering`).

A tracker's library retries a server that does not answer: MLflow's client about 255 s for each call of each run,
W&B's `init` 90 s for each run. One look before the runs, with a short timeout, says so in one line, and the
invocation goes on without that tracker: its runs' files are what counts, and they are written either way.

Only a tracker that sends over the network is asked: MLflow with an http(s) `MLFLOW_TRACKING_URI` (a file store,
the default, needs no network), W&B in a mode that syncs as it runs (`online`, `run`, `shared`: bench runs W&B
offline unless WANDB_MODE says otherwise). Any answer (an HTTP error status, a TLS handshake) counts as reachable:
the tracker's own client judges what the server says; only a connection that cannot be made, or an answer that
does not come, is unreachable. The request goes through the proxies the environment names, as the clients' do.
"""
from __future__ import annotations

import http.client
import os
import ssl
import urllib.error
import urllib.request
from typing import Callable, Iterable
from urllib.parse import urlparse

from bench.core.resources import VERSION

TIMEOUT_S = 3.0  # a server that has not answered by then is taken as away: its clients would wait minutes
SHOWN = {"mlflow": "MLflow", "wandb": "W&B"}
W_AND_B = "https://api.wandb.ai"  # W&B's server unless WANDB_BASE_URL names another
SYNCING_MODES = ("online", "run", "shared")  # the WANDB_MODE values whose runs talk to the server as they run


def endpoint(name: str) -> str | None:
    """The http(s) URL tracker `name` sends to from this environment, or None where it sends nothing over a network."""
    if name == "mlflow":
        uri = os.environ.get("MLFLOW_TRACKING_URI") or ""
    elif name == "wandb" and os.environ.get("WANDB_MODE") in SYNCING_MODES:
        uri = os.environ.get("WANDB_BASE_URL") or W_AND_B
    else:
        return None
    return uri if urlparse(uri).scheme in ("http", "https") and urlparse(uri).hostname else None


def unreachable(url: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """Why nothing at `url` answers (refused, an unknown host, no answer within `timeout_s`), or None when it does."""
    request = urllib.request.Request(url, headers={"User-Agent": f"bench/{VERSION}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # an answer: whether it is the tracker's is for its client to say
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, ssl.SSLError):
            return None  # a TLS handshake answered: certificates are the client's matter (its own CA settings)
        return _why(reason, timeout_s)
    except http.client.HTTPException:
        return None  # something answered, if not in HTTP: the client's matter
    except OSError as err:  # a timeout while reading the answer, a connection reset
        return _why(err, timeout_s)


def _why(reason: object, timeout_s: float) -> str:
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


def answering(names: Iterable[str], say: Callable[[str], None]) -> list[str]:
    """The trackers of `names` whose server answers (or that need none), in order; each other said in one line."""
    kept = []
    for name in names:
        url = endpoint(name)
        why = unreachable(url) if url else None
        if why is None:
            kept.append(name)
        else:
            say(f"{SHOWN.get(name, name)} at {url} is unreachable ({why}); runs go on without it")
    return kept
