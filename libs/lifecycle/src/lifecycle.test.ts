import { describe, expect, it } from '@jest/globals';
import { ConflictError, isBerthError } from '@berth/errors';
import { IllegalTransitionError, defineLifecycle, wireEnum } from './index.js';

// An export-like lifecycle: the shape the next entities will have.
const exports = defineLifecycle('export', {
  PENDING: { initial: true, to: ['RUNNING', 'CANCELLED'] },
  RUNNING: { to: ['RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'] },
  SUCCEEDED: {},
  FAILED: { failed: true },
  CANCELLED: {},
});

/** As protoc-gen-es generates `enum ExportStatus { EXPORT_STATUS_UNSPECIFIED = 0; ... }`. */
enum ExportStatus {
  UNSPECIFIED = 0,
  PENDING = 1,
  RUNNING = 2,
  SUCCEEDED = 3,
  FAILED = 4,
  CANCELLED = 5,
}

describe('defineLifecycle', () => {
  it('derives the states, initial, terminal, failed and unfinished ones from the table', () => {
    expect(exports.entity).toBe('export');
    expect(exports.states).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']);
    expect(exports.initial).toEqual(['PENDING']);
    expect(exports.terminal).toEqual(['SUCCEEDED', 'FAILED', 'CANCELLED']);
    expect(exports.unfinished).toEqual(['PENDING', 'RUNNING']);
    expect(exports.failed).toEqual(['FAILED']);
    expect(exports.isTerminal('FAILED')).toBe(true);
    expect(exports.isTerminal('RUNNING')).toBe(false);
    expect(exports.isFailed('CANCELLED')).toBe(false);
  });

  it('answers which states may move to a state (a self-move included) and where a state may go', () => {
    expect(exports.sourcesOf('CANCELLED')).toEqual(['PENDING', 'RUNNING']);
    expect(exports.sourcesOf('RUNNING')).toEqual(['PENDING', 'RUNNING']);
    expect(exports.sourcesOf('PENDING')).toEqual([]);
    expect(exports.targetsOf('PENDING')).toEqual(['RUNNING', 'CANCELLED']);
    expect(exports.targetsOf('SUCCEEDED')).toEqual([]);
    expect(exports.canMove('RUNNING', 'SUCCEEDED')).toBe(true);
    expect(exports.canMove('SUCCEEDED', 'RUNNING')).toBe(false);
  });

  it('tells its states from other text', () => {
    expect(exports.isState('RUNNING')).toBe(true);
    expect(exports.isState('running')).toBe(false);
    expect(exports.isState('toString')).toBe(false);
    expect(exports.isState(undefined)).toBe(false);
  });

  it('refuses an illegal move or start with IllegalTransitionError, a conflict that names the entity and both states', () => {
    expect(() => exports.assertMove('RUNNING', 'FAILED')).not.toThrow();
    let error: unknown;
    try {
      exports.assertMove('SUCCEEDED', 'RUNNING', 'e-1');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(IllegalTransitionError);
    expect(error).toBeInstanceOf(ConflictError);
    expect(isBerthError(error) && error.code).toBe('conflict');
    expect(error).toMatchObject({
      entity: 'export',
      id: 'e-1',
      from: 'SUCCEEDED',
      to: 'RUNNING',
      message: 'export e-1 is SUCCEEDED: it cannot move to RUNNING',
    });
    expect(() => exports.assertInitial('PENDING')).not.toThrow();
    expect(() => exports.assertInitial('RUNNING')).toThrow('a new export cannot start as RUNNING');
  });

  it('rejects a table that moves to an undeclared state or has no initial state', () => {
    const table: Record<string, { to?: string[]; initial?: boolean }> = { A: { initial: true, to: ['B'] } };
    expect(() => defineLifecycle('thing', table)).toThrow('lifecycle of thing: A moves to B, which is not a declared state');
    expect(() => defineLifecycle('thing', { A: { to: ['A'] } })).toThrow('lifecycle of thing: no state is initial');
  });
});

describe('wireEnum', () => {
  it('maps the states to the enum numbers and back; UNSPECIFIED and unknown numbers are no state', () => {
    const wire = wireEnum(ExportStatus, exports);
    expect(wire.encode('RUNNING')).toBe(ExportStatus.RUNNING);
    expect(wire.decode(ExportStatus.CANCELLED)).toBe('CANCELLED');
    expect(wire.decode(ExportStatus.UNSPECIFIED)).toBeUndefined();
    expect(wire.decode(99)).toBeUndefined();
    expect(wire.states).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']);
    expect(wire.isState('FAILED')).toBe(true);
    expect(wire.isState('UNSPECIFIED')).toBe(false);
  });

  it('takes the states from the enum alone for a service that relays them', () => {
    const wire = wireEnum(ExportStatus);
    expect(wire.states).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']);
    expect(wire.decode(2)).toBe('RUNNING');
  });

  it('throws at once when the enum and the lifecycle do not name the same states', () => {
    expect(() => wireEnum(ExportStatus, [...exports.states, 'PAUSED'])).toThrow('no enum value for PAUSED');
    expect(() =>
      wireEnum(
        ExportStatus,
        exports.states.filter((s) => s !== 'CANCELLED'),
      ),
    ).toThrow('enum values that are no state: CANCELLED');
  });
});
