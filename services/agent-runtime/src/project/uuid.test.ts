import { expect, test } from '@jest/globals';
import { v5 } from '@langchain/core/utils/uuid';
import { GRAPH_ASSISTANT_NAMESPACE, systemAssistantId, uuidv5 } from './index.js';

test('uuidv5 matches RFC 4122 / Python uuid.uuid5 known values', () => {
  // Python docs: uuid.uuid5(uuid.NAMESPACE_DNS, 'python.org')
  expect(uuidv5('python.org', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe('886313e1-3b8a-5372-9b90-0c9aee199e5d');
  // Computed with Python's uuid.uuid5(UUID('6ba7b821-9dad-11d1-80b4-00c04fd430c8'), name)
  expect(systemAssistantId('agent')).toBe('fe096781-5601-53d2-b2f6-0d3403f7e9ca');
  expect(systemAssistantId('echo')).toBe('046b5dc7-2108-582c-9c6c-31d556d138f0');
});

test('systemAssistantId agrees with the uuid v5 that langgraphjs uses', () => {
  for (const name of ['agent', 'echo', 'graph with spaces', 'ünïcødé', '']) {
    expect(systemAssistantId(name)).toBe(v5(name, GRAPH_ASSISTANT_NAMESPACE));
  }
});

test('uuidv5 rejects a malformed namespace', () => {
  expect(() => uuidv5('x', 'not-a-uuid')).toThrow(TypeError);
});
