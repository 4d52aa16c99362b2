// The configuration lives with its dependency in tools/lint; here so that editors find it.
export { default } from './tools/lint/prettier.config.mjs';
