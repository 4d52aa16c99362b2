/**
 * The system assistants' starting configuration: `LANGGRAPH_CONFIG`, as the LangGraph.js server reads it.
 */
import { z } from 'zod';
import { ProjectConfigError } from '@berth/langgraph-project';
import type { JsonObject } from '../storage/sql.js';

/** What a graph's system assistant starts with: `LANGGRAPH_CONFIG`'s entry for the graph. */
export interface SystemAssistantDefaults {
  config: JsonObject;
  context: JsonObject;
}

const langGraphConfig = z.record(z.string(), z.object({ context: z.record(z.string(), z.unknown()).optional() }).catchall(z.unknown()));

/**
 * The system assistants' configuration per graph id from a `LANGGRAPH_CONFIG` value (JSON
 * `{"<graph id>": {"configurable": {...}, "context": {...}, ...}}`, as the LangGraph.js server reads
 * it): `context` becomes the assistant's context, every other key its config.
 * @param source - where the value came from, for the error message.
 * @throws ProjectConfigError naming LANGGRAPH_CONFIG when the value is not such JSON.
 */
export function systemAssistantDefaults(value: string | undefined, source: string): Map<string, SystemAssistantDefaults> {
  if (value === undefined || value.trim() === '') return new Map();
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    throw new ProjectConfigError(source, 'LANGGRAPH_CONFIG', `not JSON (${(error as Error).message})`, { cause: error });
  }
  const checked = langGraphConfig.safeParse(parsed);
  if (!checked.success) {
    throw new ProjectConfigError(
      source,
      'LANGGRAPH_CONFIG',
      'must be a JSON object of graph ids to objects (whose `context` is an object), e.g. {"agent": {"configurable": {"model": "x"}, "context": {}}}',
      { cause: checked.error },
    );
  }
  return new Map(
    Object.entries(checked.data).map(([graphId, { context, ...config }]) => [
      graphId,
      // JSON.parse made them: JSON values.
      { config: config as JsonObject, context: (context ?? {}) as JsonObject },
    ]),
  );
}
