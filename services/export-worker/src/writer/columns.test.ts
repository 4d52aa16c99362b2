/** Costs become exact Parquet decimals: Postgres numeric text scaled to 12 decimals. */
import { describe, expect, it } from '@jest/globals';
import { scaleDecimal } from './columns.js';

describe('scaleDecimal', () => {
  it.each([
    ['0', 0n],
    ['12.5', 12_500_000_000_000n],
    ['-0.000000000001', -1n],
    ['0.0000000000005', 1n], // half rounds away from zero
    ['-0.0000000000005', -1n],
    ['0.00000000000049', 0n],
    ['1e-3', 1_000_000_000n],
    ['2.5E2', 250_000_000_000_000n],
    ['.5', 500_000_000_000n],
  ])('%s', (text, scaled) => {
    expect(scaleDecimal(text, 'total_cost')).toBe(scaled);
  });

  it('refuses what is no number or does not fit DECIMAL(38, 12)', () => {
    expect(() => scaleDecimal('abc', 'total_cost')).toThrow('total_cost is not a finite decimal');
    expect(() => scaleDecimal('1e27', 'total_cost')).toThrow('does not fit DECIMAL(38, 12)');
  });
});
