# shellcheck shell=bash
# Sourced by docker-stacks' start.sh before the server starts (before-notebook.d): the student
# edition of the course, in LABKIT_LANG (en or ro; default en), copied into the home once.
lang=${LABKIT_LANG:-en}
case $lang in en | ro) ;; *) lang=en ;; esac
if [ ! -e "$HOME/fsdp-course/$lang" ]; then
    mkdir -p "$HOME/fsdp-course"
    cp -r "/opt/fsdp-course/$lang" "$HOME/fsdp-course/$lang"
fi
