/**
 * The reference a revision names its upload by: written in one place, read back in one place, and
 * read back only when it is exactly what was written (two UUIDs, nothing around them).
 */
import { describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { parseUploadRef, uploadRef } from './index.js';

describe('upload references', () => {
  it('reads back the deployment and upload it was made of', () => {
    const ref = { deploymentId: randomUUID(), uploadId: randomUUID() };
    const text = uploadRef(ref);
    expect(text).toBe(`uploads/${ref.deploymentId}/${ref.uploadId}.tar.gz`);
    expect(parseUploadRef(text)).toEqual(ref);
  });

  it('refuses text that only looks like one', () => {
    const [a, b] = [randomUUID(), randomUUID()];
    for (const bad of [
      // Dashes where hex digits go: a regex of [0-9a-f-]{36} took this, and Postgres then failed on the uuid.
      `uploads/${a}/${'-'.repeat(36)}.tar.gz`,
      `uploads/${a}/${b}.tar.gz/`,
      `/uploads/${a}/${b}.tar.gz`,
      `uploads/${a}/x/${b}.tar.gz`,
      `uploads/${a}/${b}.tgz`,
      `uploads/${b}.tar.gz`,
      '',
    ]) {
      expect(parseUploadRef(bad)).toBeUndefined();
    }
  });

  it('is never made of anything but two UUIDs', () => {
    expect(() => uploadRef({ deploymentId: '../other', uploadId: randomUUID() })).toThrow(TypeError);
  });
});
