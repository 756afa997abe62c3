# shmtool/completion/shmtool.bash: bash completion for shmtool (installed as
# share/bash-completion/completions/shmtool). Commands come from
# `shmtool help --commands` and options from each command's --help, so the
# completion follows the binary it completes.
_shmtool() {
  local cur=${COMP_WORDS[COMP_CWORD]} tool=${COMP_WORDS[0]}
  local cmds groups cmd
  cmds=$("$tool" help --commands 2>/dev/null) || return 0
  if [[ $COMP_CWORD -eq 1 ]]; then
    groups=$(printf '%s\n' "$cmds" | cut -d' ' -f1 | sort -u)
    COMPREPLY=($(compgen -W "$groups help" -- "$cur"))
    return 0
  fi
  local first=${COMP_WORDS[1]}
  if [[ $first == help ]]; then
    COMPREPLY=($(compgen -W "$(printf '%s\n' "$cmds" | cut -d' ' -f1 | sort -u)" -- "$cur"))
    return 0
  fi
  local sub
  sub=$(printf '%s\n' "$cmds" | awk -v g="$first" '$1 == g && NF == 2 {print $2}')
  if [[ -n $sub && $COMP_CWORD -eq 2 ]]; then
    COMPREPLY=($(compgen -W "$sub" -- "$cur"))
    return 0
  fi
  if [[ -n $sub ]]; then cmd="$first ${COMP_WORDS[2]}"; else cmd=$first; fi
  if [[ $cur == -* ]]; then
    local opts
    # shellcheck disable=SC2086
    opts=$("$tool" $cmd --help 2>/dev/null | sed -n 's/^  \(--[a-z][a-z0-9-]*\).*/\1/p')
    COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
    return 0
  fi
  case ${COMP_WORDS[COMP_CWORD-1]} in
    --file|--svg) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
  esac
  case $first in
    save|restore|advise) COMPREPLY=($(compgen -f -- "$cur")) ;;
  esac
  # Segment names: the objects in /dev/shm (POSIX semaphores excluded).
  local segs
  segs=$(cd /dev/shm 2>/dev/null && ls -1 2>/dev/null | grep -v '^sem\.')
  COMPREPLY+=($(compgen -W "$segs" -- "$cur"))
  return 0
}
complete -F _shmtool shmtool
