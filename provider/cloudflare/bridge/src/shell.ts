// Shell text for the SDK's exec, which takes one command string.

/** q quotes one word for sh. */
export function q(s: string): string {
  return "'" + s.replace(/'/g, "'\\''") + "'";
}

/**
 * commandLine is the shell text the SDK's exec gets for argv: the command
 * under setsid -w (a new session whose leader is the command, so a kill
 * script can signal its group; -w waits and returns its status), with
 * stdin from the staged file (removed once opened) or /dev/null.
 */
export function commandLine(argv: string[], stdinFile: string | null): string {
  const words = argv.map(q).join(' ');
  if (stdinFile === null) return 'setsid -w ' + words + ' </dev/null';
  return 'setsid -w sh -c ' + q('exec 0<"$1" && rm -f -- "$1" && shift && exec "$@"') + ' sh ' + q(stdinFile) + ' ' + words;
}
