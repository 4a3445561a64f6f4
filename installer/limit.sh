# Sourced by installer/test.sh and .ci/run: `limited SECONDS_OR_DURATION WHAT COMMAND...`
# runs COMMAND with a time limit. Past it, `timeout` interrupts it (SIGINT: pytest then
# prints where it was and what finished) and kills it a minute later; `limited` prints
# one line naming WHAT and returns 124 (137 if killed). `timeout` runs in a process
# group of its own, so that at its limit it signals the test processes and theirs too;
# a Ctrl+C or a stop of the calling script is passed on to it, and through it to them.
limited() {
    local limit=$1 what=$2
    shift 2
    local rc=0 pid
    timeout --signal=INT --kill-after=60 "$limit" "$@" &
    pid=$!
    trap 'kill -INT "$pid" 2>/dev/null || true' INT
    trap 'kill -TERM "$pid" 2>/dev/null || true' TERM HUP
    while :; do  # a trapped signal ends `wait` early: wait again until it has ended
        rc=0
        wait "$pid" || rc=$?
        kill -0 "$pid" 2>/dev/null || break
    done
    trap - INT TERM HUP
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "installer: $what ran past its limit of $limit and was stopped" >&2
    fi
    return "$rc"
}
