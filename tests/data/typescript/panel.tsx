import React, { useState } from "react";

type Props = { title: string; items: string[] };

export function Panel({ title, items }: Props) {
  const [open, setOpen] = useState(false);
  return (
    <section className="panel">
      <h2 onClick={() => setOpen(!open)}>{title}</h2>
      {open && (
        <ul>
          {items.map((item) => (
            <li key={item}>{item}</li>
          ))}
        </ul>
      )}
    </section>
  );
}

export const Empty = () => <p>nothing here</p>;
