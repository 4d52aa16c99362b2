/**
 * What the platform and a deployment's agent server agree on, besides the agent server's
 * environment (`loadAgentServeConfig`): the Redis keys it may touch, its webhook secret's form, and
 * how its init container authenticates to the artifact endpoint. The control plane and the CLI use
 * these without loading the agent server.
 */
export { redisAclRules, redisKeyPrefix } from './redis-acl.js';
export { InvalidWebhookSecretError, generateWebhookSecret, webhookKey } from './webhook-secret.js';
export { ARTIFACT_AUTH_SCHEME } from './artifact.js';
