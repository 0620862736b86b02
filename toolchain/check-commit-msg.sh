#!/usr/bin/env bash
# The shape of a commit message (the pre-commit `commit-msg` hook, .pre-commit-config.yaml):
# a subject of at most 72 characters, a blank line, then a body saying what and why.
# Git's comment lines and everything below its scissors line are not part of the message.
# Merges, reverts and fixup!/squash! commits that git or a rebase writes need no body.
set -euo pipefail
file="${1:?usage: check-commit-msg.sh <commit message file>}"
awk '
  /^# -+ >8 -+$/ { exit }
  /^#/ { next }
  { lines[++n] = $0 }
  END {
    while (n > 0 && lines[n] ~ /^[[:space:]]*$/) n--
    subject = lines[1]
    if (n == 0 || subject ~ /^[[:space:]]*$/) { print "commit message: the first line (the subject) is empty"; exit 1 }
    if (length(subject) > 72) {
      printf "commit message: the subject is %d characters, at most 72:\n  %s\n", length(subject), subject
      exit 1
    }
    if (subject ~ /^(Merge |Revert "|fixup! |squash! |amend! )/) exit 0
    if (n < 3 || lines[2] !~ /^[[:space:]]*$/) {
      print "commit message: a subject, a blank line, then a body saying what changed and why"
      exit 1
    }
  }
' "$file"
