import { describe, expect, it } from '@jest/globals';
import { SecretBox } from './secret-box.js';

describe('SecretBox', () => {
  const box = new SecretBox(SecretBox.generateKey());

  it('opens what it sealed, and each seal of the same text differs', () => {
    const a = box.seal('s3cret');
    expect(box.open(a)).toBe('s3cret');
    expect(box.seal('s3cret').equals(a)).toBe(false);
    expect(a.includes(Buffer.from('s3cret'))).toBe(false);
  });

  it('refuses a tampered value and another key', () => {
    const sealed = box.seal('s3cret');
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => box.open(tampered)).toThrow();
    expect(() => new SecretBox(SecretBox.generateKey()).open(sealed)).toThrow();
  });

  it('derives the same credential for the same purpose, another for another purpose or key', () => {
    expect(box.derive('a')).toBe(box.derive('a'));
    expect(box.derive('a')).not.toBe(box.derive('b'));
    expect(new SecretBox(SecretBox.generateKey()).derive('a')).not.toBe(box.derive('a'));
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => new SecretBox('c2hvcnQ=')).toThrow(/32 bytes/);
  });
});
