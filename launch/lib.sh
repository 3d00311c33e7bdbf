# shellcheck shell=bash
# Sourced by the launch scripts: messages in English or Romanian, and the course's Python.
# The language is chosen as labkit.i18n chooses it: LABKIT_LANG, else LC_ALL, LC_MESSAGES, LANG.

labkit_lang() {
    local v code
    for v in "${LABKIT_LANG:-}" "${LC_ALL:-}" "${LC_MESSAGES:-}" "${LANG:-}"; do
        code=$(printf '%s' "$v" | tr '[:upper:]' '[:lower:]') # not ${v,,}: macOS ships bash 3.2
        code=${code%%[_.@-]*}
        case $code in en | ro) echo "$code" && return ;; esac
    done
    echo en
}

# say "English text %s" "Text românesc %s" ARGS...: one line on stderr, in the user's language
say() {
    local en=$1 ro=$2
    shift 2
    # shellcheck disable=SC2059  # the format is ours, the arguments are the user's
    if [ "$(labkit_lang)" = ro ]; then printf "$ro\n" "$@" >&2; else printf "$en\n" "$@" >&2; fi
}

die() {
    say "$@"
    exit 2
}

# The Python to use: $PYTHON if set, else the repo's .venv, else python3 from PATH.
labkit_python() {
    local repo=$1
    if [ -n "${PYTHON:-}" ]; then
        echo "$PYTHON"
    elif [ -x "${LABKIT_VENV:-$repo/.venv}/bin/python" ]; then
        echo "${LABKIT_VENV:-$repo/.venv}/bin/python"
    else
        echo python3
    fi
}
