export { RestartBackoff, Supervisor, restartPolicy } from './supervisor.js';
export type { Crash, Incarnation, RestartPolicy, SupervisorOptions } from './supervisor.js';
