/** The agent server's graphs and assistants, which several of Studio's tabs offer to choose from, and the list to choose a graph. */
import { useQuery } from '@tanstack/react-query';
import { useId } from 'react';
import { useStudio } from './context';

export interface StudioGraph {
  graphId: string;
  /** The graph's system assistant. */
  assistantId: string;
}

/** The graphs of the project, by name: one system assistant per graph (the agent server makes them at start). */
export function useGraphs() {
  const { client, target } = useStudio();
  return useQuery({
    queryKey: ['studio', target.key, 'graphs'],
    queryFn: async ({ signal }): Promise<StudioGraph[]> => {
      const found = await client.assistants.search({ metadata: { created_by: 'system' }, limit: 100, signal });
      return found.map((a) => ({ graphId: a.graph_id, assistantId: a.assistant_id })).sort((a, b) => a.graphId.localeCompare(b.graphId));
    },
  });
}

/** Every assistant of the agent server (the first 100), by graph. */
export function useAssistants() {
  const { client, target } = useStudio();
  return useQuery({
    queryKey: ['studio', target.key, 'assistants'],
    queryFn: async ({ signal }) => (await client.assistants.search({ limit: 100, signal })).sort((a, b) => a.graph_id.localeCompare(b.graph_id)),
  });
}

/** A list to choose one of the graphs, labelled "Graph". */
export function GraphPicker({ graphs, value, onChange }: { graphs: StudioGraph[]; value: string; onChange: (graphId: string) => void }) {
  const id = useId();
  return (
    <div className="flex items-center gap-2 text-sm">
      <label htmlFor={id} className="font-medium">
        Graph
      </label>
      <select
        id={id}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        className="rounded-md border border-slate-400 bg-white px-2 py-1 dark:border-slate-500 dark:bg-slate-900"
      >
        {graphs.map((g) => (
          <option key={g.graphId} value={g.graphId}>
            {g.graphId}
          </option>
        ))}
      </select>
    </div>
  );
}
