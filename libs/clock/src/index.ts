export { sleepOn, systemClock } from './clock.js';
export type { Clock, Timer } from './clock.js';
export { ManualClock } from './manual-clock.js';
