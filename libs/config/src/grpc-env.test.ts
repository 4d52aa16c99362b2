import { describe, expect, it } from '@jest/globals';
import { parseGrpcServerEnv } from './index.js';

describe('parseGrpcServerEnv', () => {
  it('reads the internal token from BERTH_INTERNAL_TOKEN; unset or empty means no check', () => {
    const token = 'k'.repeat(43);
    expect(parseGrpcServerEnv({ BERTH_INTERNAL_TOKEN: token })).toEqual({ grpcHost: '127.0.0.1', grpcPort: 50051, logLevel: 'info', internalToken: token });
    expect(parseGrpcServerEnv({ BERTH_INTERNAL_TOKEN: '' })).not.toHaveProperty('internalToken');
    expect(parseGrpcServerEnv({})).not.toHaveProperty('internalToken');
  });
});
