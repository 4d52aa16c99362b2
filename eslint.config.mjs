// The configuration lives with its dependencies in tools/lint (see its package.json for why).
export { default } from './tools/lint/eslint.config.mjs';
