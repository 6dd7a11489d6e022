/**
 * The fake engine's tokenizer and chat template: deterministic and trivial, so a test can
 * compute the token ids a text or a conversation becomes. One token per whitespace-separated
 * word (FNV-1a of the word, folded into 100..50,099); the chat template writes each message as
 * `<|role|> content` and, with `add_generation_prompt` (default true, as vLLM's), ends with
 * `<|assistant|>`.
 */

export interface ChatMessage {
  role: string;
  content: string;
}

/** The token id of one word. */
export function wordToken(word: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < word.length; i++) {
    h ^= word.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return 100 + (h % 50_000);
}

/** The token ids of a text. */
export function tokenize(text: string): number[] {
  const out: number[] = [];
  for (const w of text.split(/\s+/)) if (w !== '') out.push(wordToken(w));
  return out;
}

/** The text of a conversation with the chat template applied. */
export function applyChatTemplate(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
  const parts = messages.map((m) => `<|${m.role}|> ${m.content}`);
  if (addGenerationPrompt) parts.push('<|assistant|>');
  return parts.join('\n');
}

/** The words an answer is made of: `w<n>`, deterministic per position. */
export function answerWord(i: number): string {
  return `w${i}`;
}
