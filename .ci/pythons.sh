#!/usr/bin/env bash
# The interpreters the archive attacks run on, one path a line: Debian 12's own 3.11 (the oldest that
# requires-python admits and CI has), and the newest found beside it (pyenv's, or python3.1x on PATH).
# Without Debian's it fails; without a newer one it says so on stderr, loudly, and gives Debian's alone.
set -euo pipefail
oldest=/usr/bin/python3.11
[[ -x $oldest ]] || { echo ".ci/pythons.sh: no $oldest (Debian 12's Python)" >&2; exit 1; }
newest="" newest_version=0
for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3 $(compgen -c python3.1 | sort -u); do
  python=$(command -v "$candidate" 2>/dev/null) || continue
  version=$("$python" -c 'import sys; print(sys.version_info[0] * 100 + sys.version_info[1])' 2>/dev/null) || continue
  if ((version > newest_version)); then newest=$python newest_version=$version; fi
done
echo "$oldest"
if ((newest_version > 311)); then
  echo "$newest"
else
  echo ".ci/pythons.sh: WARNING: no Python newer than 3.11 found (pyenv or python3.1x on PATH): the archive attacks" \
       "run on $oldest alone" >&2
fi
