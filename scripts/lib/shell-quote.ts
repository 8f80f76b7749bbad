/** POSIX single-quote quoting of one argument for a remote `sh -c` command line. */
export function shQuote(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}
