/**
 * Studio's tabs, in order: one entry per part (each part's component in a file of its own). The
 * first is where Studio opens.
 */
import type { ComponentType } from 'react';
import { AssistantsTab } from './assistants/assistants-tab';
import { GraphTab } from './graph-tab';
import { ThreadsTab } from './threads/threads-tab';
import { CronsTab } from './memory/crons-tab';
import { MemoryTab } from './memory/memory-tab';
import { RunsTab } from './runs/runs-tab';

export interface StudioTab {
  /** In the console's URL (`?tab=`). */
  id: string;
  label: string;
  Component: ComponentType;
}

export const STUDIO_TABS: StudioTab[] = [
  { id: 'graph', label: 'Graph', Component: GraphTab },
  { id: 'assistants', label: 'Assistants', Component: AssistantsTab },
  { id: 'threads', label: 'Threads', Component: ThreadsTab },
  { id: 'runs', label: 'Runs', Component: RunsTab },
  { id: 'memory', label: 'Memory', Component: MemoryTab },
  { id: 'crons', label: 'Crons', Component: CronsTab },
];
