// The global setup of one tier (jest.config.mjs). Jest runs each distinct global setup module once
// per run, with the config of the first project that names it: a module per tier makes it run for
// every tier that has files in the run.
export { default } from '../jest-global-setup.mjs';
