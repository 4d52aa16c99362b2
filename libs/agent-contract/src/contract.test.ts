import { describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { InvalidWebhookSecretError, generateWebhookSecret, redisAclRules, redisKeyPrefix, webhookKey } from './index.js';

describe('webhook secrets', () => {
  test('a generated secret stands for a 32-byte key', () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(webhookKey(secret)).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(secret);
  });

  test.each([
    ['no prefix', randomBytes(32).toString('base64')],
    ['too short a key', `whsec_${randomBytes(16).toString('base64')}`],
    ['too long a key', `whsec_${randomBytes(65).toString('base64')}`],
    ['not base64', `whsec_${'!'.repeat(44)}`],
  ])('%s is refused', (_case, secret) => {
    expect(() => webhookKey(secret)).toThrow(InvalidWebhookSecretError);
  });
});

describe('Redis ACL of an agent server', () => {
  test('its keys and channels are those under its own prefix only', () => {
    expect(redisKeyPrefix('agent_1')).toBe('berth:agent_1');
    expect(redisAclRules('agent_1').slice(0, 2)).toEqual(['~berth:agent_1:*', '&berth:agent_1:*']);
  });

  test('a schema with glob characters cannot widen the patterns', () => {
    expect(() => redisKeyPrefix('agent*')).toThrow(/not a safe SQL identifier/);
  });
});
