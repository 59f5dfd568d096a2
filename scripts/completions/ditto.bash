# ditto.bash -- bash completion for ditto (installed by `make install`).
#
# Commands and options are read from `ditto --help` and `ditto COMMAND --help`
# when completing, so they follow the binary and cannot drift from it; GPU
# names come from `ditto hw list`.

_ditto_commands()
{
    "$1" --help 2>/dev/null | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }'
}

_ditto_options()
{
    "$1" "$2" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

_ditto()
{
    local cur prev bin cmd
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    bin=${COMP_WORDS[0]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$(_ditto_commands "$bin") --help --version" -- "$cur"))
        return
    fi
    cmd=${COMP_WORDS[1]}
    case $prev in
        --gpu)
            COMPREPLY=($(compgen -W "$("$bin" hw list 2>/dev/null | awk 'NR > 1 { print $1 }')" -- "$cur"))
            return ;;
        --out|--session-dir)
            COMPREPLY=($(compgen -d -- "$cur"))
            return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_ditto_options "$bin" "$cmd")" -- "$cur"))
        return
    fi
    if [ "$cmd" = hw ] && [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "list show check match" -- "$cur"))
        return
    fi
    if [ "$cmd" = kb ] && [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "list show approve reject import export retrieve" -- "$cur"))
        return
    fi
    # matrices (.mtx, .smtx, gzip or not), specs and kernels
    local f
    while IFS= read -r f; do
        case $f in
            *.mtx|*.mtx.gz|*.smtx|*.smtx.gz|*.json|*.cu|*.lua) COMPREPLY+=("$f") ;;
            *) [ -d "$f" ] && COMPREPLY+=("$f") ;;
        esac
    done < <(compgen -f -- "$cur")
}

complete -o filenames -F _ditto ditto
