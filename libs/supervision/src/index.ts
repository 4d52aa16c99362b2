export { RestartBackoff, Supervisor, restartPolicy, systemClock } from './supervisor.js';
export type { Clock, Crash, Incarnation, RestartPolicy, SupervisorOptions, Timer } from './supervisor.js';
