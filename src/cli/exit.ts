/**
 * The exit statuses every command follows, so a shell script can tell "the
 * input had problems" from "the command could not do its work" by the number
 * alone (docs/cli.md, "In a shell pipeline"; `agui-state --help`).
 */
export const EXIT = {
  /** Done, nothing to report. */
  done: 0,
  /**
   * Done, and the input had problems: check's findings, normalize --strict's
   * skips, fix's events sent as they came. A STATE_SNAPSHOT that may replace
   * members the client keeps for itself (SNAPSHOT_REPLACES_UNKNOWN, check
   * without --state) is one: the promise is that the client's own keys are
   * untouched, and check cannot show that without knowing them; `--state
   * FILE` says what the client holds (`{}` for nothing), and then only a
   * snapshot that does wipe one is a finding (protocol/README.md §13).
   */
  problems: 1,
  /** Nothing done: a usage error, or input that cannot be read or is not what the command takes. */
  refused: 2,
  /**
   * `serve --listen` found a live sidecar serving its socket already: nothing done, and nothing
   * wrong. Apart from 2 so that a worker that starts the host's sidecar (protocol/README.md §2) tells
   * "another worker's start won: connect to it" from "the flags were refused: give up".
   */
  served: 3,
  /**
   * The command failed on a bug of its own, not on its input: stderr says
   * "internal error" and gives the stack to report. Kept apart from 1 and 2
   * so that a bug never reads as "the input had problems" or "the input is
   * unreadable". 70 is EX_SOFTWARE in BSD's sysexits(3).
   */
  internal: 70,
} as const;

/** The table as `--help` and docs/cli.md print it. */
export const EXIT_TABLE = `Exit status, the same for every command:
  0  done, nothing to report (serve and proxy: stopped by end of input or a signal)
  1  done, and the input had problems: check's findings, normalize --strict's
     skips, fix's events the client refuses that went out as they came;
     without --state, a STATE_SNAPSHOT that may replace members the client
     keeps for itself is a finding of check's (SNAPSHOT_REPLACES_UNKNOWN):
     give --state FILE ({} when the client keeps nothing) to check only the
     members it does hold
  2  nothing done: a usage error (an unknown command or flag, a missing
     argument; the line on stderr ends with the command's usage; "--" ends
     the flags), or input that cannot be read or is malformed (not JSON, an
     integer beyond ±(2^53 − 1), a number beyond a double's range, nested
     too deep, too large, a state that is not an object, a malformed
     pointer), or a proxy or sidecar (serve --listen) that cannot listen;
     one line on stderr names the file (or stdin) and the JSON Pointer
  3  serve --listen: a live sidecar serves that socket already; connect to it
  70 an internal error: a bug in agui-state, not a problem with the input;
     stderr says so and gives the stack to report
`;
