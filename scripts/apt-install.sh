#!/usr/bin/env bash
# apt-install.sh NAME WHAT PACKAGE...: installs Debian packages a test needs through apt-get (sudo
# when not root), saying so as NAME; without apt-get it only says what to install (WHAT) and
# exits 0, leaving the tests that need it to skip, or to fail under CI. The install scripts call it
# once they have found what they need missing.
set -euo pipefail
name="$1" what="$2"
shift 2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "$name: no apt-get here: install $what yourself" >&2
	exit 0
fi
sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
echo "$name: installing $* (apt-get)"
$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
