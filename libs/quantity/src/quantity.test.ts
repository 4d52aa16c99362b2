import { describe, expect, it } from '@jest/globals';
import { QuantityError, cpuQuantity, isResourceQuantity, memoryQuantity, parseQuantity } from './index.js';

describe('parseQuantity', () => {
  it.each([
    ['500m', 0.5],
    ['1', 1],
    ['1.5', 1.5],
    ['.5', 0.5],
    ['2k', 2000],
    ['512Mi', 512 * 2 ** 20],
    ['2Gi', 2 * 2 ** 30],
    ['1G', 1e9],
    ['1e3', 1000],
    ['5E-1', 0.5],
    ['100u', 1e-4],
    ['+3', 3],
  ])('%s is %d', (text, value) => expect(parseQuantity(text)).toBeCloseTo(value, 12));

  it.each(['', 'abc', '1.5.2', '512MB', '2 Gi', 'Gi', '1e', '1Ki2', '--1', '1e999'])('refuses %j with what a quantity looks like', (text) => {
    expect(() => parseQuantity(text)).toThrow(QuantityError);
    expect(() => parseQuantity(text)).toThrow(/like 500m, 0.5, 512Mi or 2Gi/);
  });

  it('isResourceQuantity takes quantities of at least zero only', () => {
    expect(['0', '250m', '1Gi'].every(isResourceQuantity)).toBe(true);
    expect(['-1', '-500m', 'x', '1 Gi'].some(isResourceQuantity)).toBe(false);
  });
});

describe('formatting', () => {
  it('writes CPU whole or in millicores, memory in Mi, and parses back to the same amount', () => {
    expect([cpuQuantity(1), cpuQuantity(0.5), cpuQuantity(1.5), cpuQuantity(3), cpuQuantity(0.0001)]).toEqual(['1', '500m', '1500m', '3', '1m']);
    expect([memoryQuantity(512), memoryQuantity(0.2)]).toEqual(['512Mi', '1Mi']);
    expect(parseQuantity(cpuQuantity(1.25))).toBe(1.25);
    expect(parseQuantity(memoryQuantity(256))).toBe(256 * 2 ** 20);
  });
});
