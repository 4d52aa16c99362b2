/**
 * The signals that stop a Berth command that runs until stopped (`berth up` while it starts, its
 * supervisor, `berth serve`, `berth dev`): Ctrl-C, a service manager's or test runner's SIGTERM, and
 * the SIGHUP of a closed terminal. Each stops what it started, whenever it comes.
 */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
