//! The `#[tool]` attribute macro of [`dsh-tools`](https://docs.rs/dsh-tools): a typed tool from
//! one `async fn`.
//!
//! Use it through `dsh_tools::tool` (or `dsh_tools::prelude::*`); the generated code names
//! `dsh-tools` items, so this crate is of no use on its own. The reference, with examples, is
//! on `dsh_tools::tool`.
//!
//! Unsafe budget: 0 — none.

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
#[allow(dead_code)] // A proc-macro crate may export only macros; doctests run on private items too.
struct ReadmeDoctests;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, GenericArgument, Ident, ItemFn, Lit, LitInt, LitStr, Meta,
    Pat, Path, PathArguments, ReturnType, Type, parse_macro_input,
};

/// Turns an `async fn` into a typed tool: see `dsh_tools::tool` for the reference.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut options = Options::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    parse_macro_input!(attr with parser);
    let function = parse_macro_input!(item as ItemFn);
    expand(options, function).into()
}

/// The options of `#[tool(...)]`.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    timeout_ms: Option<u64>,
    concurrency_safe: Option<Span>,
    render: Option<Path>,
    struct_name: Option<Ident>,
    krate: Option<Path>,
}

const OPTIONS: &str = "name = \"...\", description = \"...\", timeout_ms = <milliseconds>, \
    concurrency_safe, render = <path to a fn(&Args, &Output) -> Vec<ContentBlock>>, \
    struct_name = <Ident>, crate = <path to dsh_tools>";

impl Options {
    fn parse(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        let span = meta.path.span();
        let duplicate = |key: &str| syn::Error::new(span, format!("`{key}` is given twice"));
        if meta.path.is_ident("name") {
            if self.name.is_some() {
                return Err(duplicate("name"));
            }
            let name: LitStr = value(&meta, "`name` takes a string: `name = \"read_file\"`")?;
            check_tool_name(&name.value(), name.span())?;
            self.name = Some(name);
        } else if meta.path.is_ident("description") {
            if self.description.is_some() {
                return Err(duplicate("description"));
            }
            self.description = Some(value(
                &meta,
                "`description` takes a string: `description = \"Read a file. Use it when...\"`",
            )?);
        } else if meta.path.is_ident("timeout_ms") {
            if self.timeout_ms.is_some() {
                return Err(duplicate("timeout_ms"));
            }
            let timeout: LitInt = value(
                &meta,
                "`timeout_ms` takes a whole number of milliseconds: `timeout_ms = 5000`",
            )?;
            let millis = timeout.base10_parse::<u64>()?;
            if millis == 0 {
                return Err(syn::Error::new(
                    timeout.span(),
                    "`timeout_ms` must be positive: leave it out for no timeout",
                ));
            }
            self.timeout_ms = Some(millis);
        } else if meta.path.is_ident("concurrency_safe") {
            if self.concurrency_safe.is_some() {
                return Err(duplicate("concurrency_safe"));
            }
            if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                return Err(meta.error(
                    "`concurrency_safe` is a flag: write `concurrency_safe`, or leave it out",
                ));
            }
            self.concurrency_safe = Some(span);
        } else if meta.path.is_ident("render") {
            if self.render.is_some() {
                return Err(duplicate("render"));
            }
            self.render = Some(value(
                &meta,
                "`render` takes the path of a `fn(&Args, &Output) -> Vec<ContentBlock>`: `render = render_answer`",
            )?);
        } else if meta.path.is_ident("struct_name") {
            if self.struct_name.is_some() {
                return Err(duplicate("struct_name"));
            }
            self.struct_name = Some(value(
                &meta,
                "`struct_name` takes an identifier: `struct_name = ReadFileTool`",
            )?);
        } else if meta.path.is_ident("crate") {
            if self.krate.is_some() {
                return Err(duplicate("crate"));
            }
            let expected = "`crate` takes the path of `dsh_tools`: `crate = ::my_tools`";
            self.krate = Some(
                meta.value()?
                    .call(Path::parse_mod_style)
                    .map_err(|e| syn::Error::new(e.span(), expected))?,
            );
        } else {
            let path = &meta.path;
            let key = quote!(#path).to_string().replace(' ', "");
            return Err(syn::Error::new(
                span,
                format!("unknown `#[tool]` option `{key}`; the options are: {OPTIONS}"),
            ));
        }
        Ok(())
    }
}

/// Parses an option's value, or says what the option takes.
fn value<T: syn::parse::Parse>(
    meta: &syn::meta::ParseNestedMeta<'_>,
    expected: &str,
) -> syn::Result<T> {
    let input = meta
        .value()
        .map_err(|_| syn::Error::new(meta.path.span(), expected))?;
    input
        .parse()
        .map_err(|e: syn::Error| syn::Error::new(e.span(), expected))
}

/// The registry's name rule, checked at compile time so a bad name is not a runtime surprise.
fn check_tool_name(name: &str, span: Span) -> syn::Result<()> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(syn::Error::new(
            span,
            format!("invalid tool name {name:?}: names must match ^[A-Za-z0-9_-]{{1,64}}$"),
        ));
    }
    if name == "run_code" {
        return Err(syn::Error::new(
            span,
            "the tool name `run_code` is reserved for the Code Mode transport",
        ));
    }
    Ok(())
}

/// Collects every problem, so one build reports them all.
#[derive(Default)]
struct Problems(Option<syn::Error>);

impl Problems {
    fn add(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(first) => first.combine(error),
            None => self.0 = Some(error),
        }
    }
}

/// How the function receives the call's arguments.
enum Arguments {
    /// Plain parameters: the macro generates the arguments struct, one field per parameter.
    Fields(Vec<Field>),
    /// One `#[args]` parameter whose type is the arguments struct.
    Struct(Box<Type>),
}

/// One plain parameter, as a field of the generated arguments struct.
struct Field {
    ident: Ident,
    ty: Type,
    attrs: Vec<Attribute>,
}

/// Where a parameter's value comes from when the tool calls the function.
enum Source {
    Field(Ident),
    Args,
    Exec { by_ref: bool },
}

/// What the function returns.
struct Output {
    ty: Type,
    fallible: bool,
}

fn expand(options: Options, mut function: ItemFn) -> TokenStream2 {
    let mut problems = Problems::default();
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        problems.add(syn::Error::new(
            sig.fn_token.span,
            "`#[tool]` needs an `async fn`: the registry awaits the tool's body",
        ));
    }
    if let Some(constness) = &sig.constness {
        problems.add(syn::Error::new(
            constness.span,
            "a `#[tool]` function cannot be `const`",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        problems.add(syn::Error::new(
            unsafety.span,
            "a `#[tool]` function cannot be `unsafe`: the registry calls it with any arguments the schema accepts",
        ));
    }
    if let Some(abi) = &sig.abi {
        problems.add(syn::Error::new(
            abi.span(),
            "a `#[tool]` function cannot have an `extern` ABI",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        problems.add(syn::Error::new(
            sig.generics.span(),
            "a `#[tool]` function cannot be generic: the registry derives its schemas from one concrete arguments type and one concrete output type",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        problems.add(syn::Error::new(
            variadic.span(),
            "a `#[tool]` function cannot be variadic",
        ));
    }

    let description = match &options.description {
        Some(text) => Some(text.value()),
        None => doc_text(&function.attrs, &mut problems),
    };
    match &description {
        Some(text) if !text.trim().is_empty() => {}
        _ => problems.add(syn::Error::new(
            sig.ident.span(),
            format!(
                "add a doc comment to `{}`: it is the tool's description, what the model reads to decide when to call it (or write `#[tool(description = \"...\")]`)",
                sig.ident
            ),
        )),
    }

    let (arguments, sources) = arguments(&mut function, &mut problems);
    let output = output(&function.sig.ident, &function.sig.output, &mut problems);

    // On any problem, keep the function (its parameter attributes removed) so the rest of the
    // crate still resolves it, and report every problem at once.
    if let Some(error) = problems.0 {
        let error = error.to_compile_error();
        return quote! { #error #function };
    }
    let (Some(description), Some(output)) = (description, output) else {
        return quote! { #function };
    };
    generate(
        &options,
        &function,
        description,
        arguments,
        &sources,
        &output,
    )
}

/// The doc comment's text: each line without the one space `///` leaves, joined by newlines.
fn doc_text(attrs: &[Attribute], problems: &mut Problems) -> Option<String> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        let Meta::NameValue(pair) = &attr.meta else {
            continue;
        };
        match &pair.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) => {
                let text = text.value();
                // An empty `///` line is a paragraph break, and `"".lines()` yields nothing.
                if text.is_empty() {
                    lines.push(String::new());
                }
                for line in text.lines() {
                    lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
                }
            }
            other => problems.add(syn::Error::new(
                other.span(),
                "`#[tool]` reads the description from literal doc comments; write `#[tool(description = ...)]` for a computed one",
            )),
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(lines.join("\n").trim().to_owned())
}

/// Whether a parameter's attributes describe it to the model: a doc comment with text in it, or
/// a `#[schemars(description = ...)]`.
fn documented(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if attr.path().is_ident("doc") {
            return match &attr.meta {
                Meta::NameValue(pair) => match &pair.value {
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(text),
                        ..
                    }) => !text.value().trim().is_empty(),
                    // A computed doc (`#[doc = include_str!(..)]`) is text the compiler reads.
                    _ => true,
                },
                _ => false,
            };
        }
        // `#[schemars(description = "...")]`, wherever the key stands in the list.
        match &attr.meta {
            Meta::List(list) if attr.path().is_ident("schemars") => {
                let tokens: Vec<proc_macro2::TokenTree> = list.tokens.clone().into_iter().collect();
                tokens.windows(2).any(|pair| {
                    matches!(&pair[0], proc_macro2::TokenTree::Ident(key) if key == "description")
                        && matches!(&pair[1], proc_macro2::TokenTree::Punct(eq) if eq.as_char() == '=')
                })
            }
            _ => false,
        }
    })
}

fn is_exec_context(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "ExecContext" && s.arguments.is_none()),
        Type::Group(group) => is_exec_context(&group.elem),
        _ => false,
    }
}

/// Reads the parameters: the arguments (plain parameters or one `#[args]` struct) and the
/// optional `ExecContext`. Removes the attributes the function itself cannot carry.
fn arguments(function: &mut ItemFn, problems: &mut Problems) -> (Arguments, Vec<Source>) {
    let mut fields = Vec::new();
    let mut args_struct: Option<(Box<Type>, Span)> = None;
    let mut exec_seen = false;
    let mut sources = Vec::new();
    for input in &mut function.sig.inputs {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                problems.add(syn::Error::new(
                    receiver.span(),
                    "a `#[tool]` function takes no `self`: write a free function (state it needs can live in a static or a service reached through `ExecContext`), or implement `Tool` by hand",
                ));
                continue;
            }
            FnArg::Typed(typed) => typed,
        };
        let is_args = typed.attrs.iter().any(|a| a.path().is_ident("args"));
        let (moved, kept): (Vec<Attribute>, Vec<Attribute>) =
            std::mem::take(&mut typed.attrs).into_iter().partition(|a| {
                a.path().is_ident("doc")
                    || a.path().is_ident("serde")
                    || a.path().is_ident("schemars")
                    || a.path().is_ident("args")
            });
        typed.attrs = kept;

        let (by_ref, inner) = match &*typed.ty {
            Type::Reference(reference) => (true, &*reference.elem),
            other => (false, other),
        };
        if !is_args && is_exec_context(inner) {
            if exec_seen {
                problems.add(syn::Error::new(
                    typed.ty.span(),
                    "a `#[tool]` function takes at most one `ExecContext`",
                ));
            }
            if by_ref && matches!(&*typed.ty, Type::Reference(r) if r.mutability.is_some()) {
                problems.add(syn::Error::new(
                    typed.ty.span(),
                    "take the `ExecContext` by value or as `&ExecContext`",
                ));
            }
            exec_seen = true;
            sources.push(Source::Exec { by_ref });
            continue;
        }
        if is_args {
            if by_ref {
                problems.add(syn::Error::new(
                    typed.ty.span(),
                    "the `#[args]` struct is deserialised from the call's arguments, so take it by value",
                ));
            }
            if let Some((_, first)) = &args_struct {
                let mut error = syn::Error::new(
                    typed.span(),
                    "a `#[tool]` function takes at most one `#[args]` parameter",
                );
                error.combine(syn::Error::new(*first, "the first `#[args]` parameter"));
                problems.add(error);
            }
            args_struct = Some((typed.ty.clone(), typed.span()));
            sources.push(Source::Args);
            continue;
        }
        if by_ref {
            problems.add(syn::Error::new(
                typed.ty.span(),
                "a tool parameter is deserialised from the call's arguments, so it must be an owned type (`String`, not `&str`)",
            ));
        }
        let ident = match &*typed.pat {
            Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => pat.ident.clone(),
            other => {
                problems.add(syn::Error::new(
                    other.span(),
                    "a tool parameter needs a plain name (it names the argument the model passes); destructure inside the body, or take an `#[args]` struct",
                ));
                continue;
            }
        };
        if !documented(&moved) {
            problems.add(syn::Error::new(
                ident.span(),
                format!(
                    "add a doc comment to the parameter `{ident}`: it is the argument's description, what the model reads to know what to pass (or write `#[schemars(description = \"...\")]`)"
                ),
            ));
        }
        sources.push(Source::Field(ident.clone()));
        fields.push(Field {
            ident,
            ty: (*typed.ty).clone(),
            attrs: moved,
        });
    }
    let arguments = match args_struct {
        Some((ty, span)) => {
            if let Some(field) = fields.first() {
                let mut error = syn::Error::new(
                    field.ident.span(),
                    "with an `#[args]` struct, the function takes no other arguments: add this one to the struct",
                );
                error.combine(syn::Error::new(span, "the `#[args]` parameter"));
                problems.add(error);
            }
            Arguments::Struct(ty)
        }
        None => Arguments::Fields(fields),
    };
    (arguments, sources)
}

/// The output type: `T`, or the `T` of `Result<T, E>` (any error that converts into
/// `ToolError`).
fn output(ident: &Ident, output: &ReturnType, problems: &mut Problems) -> Option<Output> {
    const RETURNS: &str = "a `#[tool]` function returns the tool's output: a type that derives `Serialize` and `JsonSchema`, or `Result<T, ToolError>`";
    let ty = match output {
        ReturnType::Default => {
            problems.add(syn::Error::new(
                ident.span(),
                format!("{RETURNS}; this one returns nothing"),
            ));
            return None;
        }
        ReturnType::Type(_, ty) => &**ty,
    };
    if matches!(ty, Type::ImplTrait(_) | Type::Infer(_) | Type::Never(_)) {
        problems.add(syn::Error::new(
            ty.span(),
            format!("{RETURNS}; name the type"),
        ));
        return None;
    }
    if let Type::Path(path) = ty
        && path.qself.is_none()
        && let Some(last) = path.path.segments.last()
        && last.ident == "Result"
    {
        let first = match &last.arguments {
            PathArguments::AngleBracketed(args) => args.args.iter().find_map(|a| match a {
                GenericArgument::Type(ty) => Some(ty.clone()),
                _ => None,
            }),
            _ => None,
        };
        let Some(first) = first else {
            problems.add(syn::Error::new(
                ty.span(),
                format!("{RETURNS}; write the output type in `Result<T, ToolError>`"),
            ));
            return None;
        };
        return Some(Output {
            ty: first,
            fallible: true,
        });
    }
    Some(Output {
        ty: ty.clone(),
        fallible: false,
    })
}

/// `read_file` → `ReadFile`.
fn pascal_case(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        })
        .collect()
}

fn generate(
    options: &Options,
    function: &ItemFn,
    description: String,
    arguments: Arguments,
    sources: &[Source],
    output: &Output,
) -> TokenStream2 {
    let krate = options
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::dsh_tools));
    let private = quote!(#krate::__private);
    let vis = &function.vis;
    let fn_ident = &function.sig.ident;
    let fn_name = fn_ident.to_string();
    let fn_name = fn_name.strip_prefix("r#").unwrap_or(&fn_name);
    let tool_name = options
        .name
        .as_ref()
        .map_or_else(|| fn_name.to_owned(), LitStr::value);
    let name_check = match &options.name {
        Some(_) => None,
        None => check_tool_name(&tool_name, fn_ident.span()).err(),
    };
    if let Some(error) = name_check {
        let error = error.to_compile_error();
        return quote! { #error #function };
    }
    let struct_ident = options
        .struct_name
        .clone()
        .unwrap_or_else(|| Ident::new(&pascal_case(fn_name), fn_ident.span()));
    let struct_doc = format!(
        "The `{tool_name}` tool, made by `#[tool]` from the function `{fn_name}`: register it with `ToolRegistry::register_tool`."
    );

    let args_param = Ident::new("args", Span::mixed_site());
    let exec_param = Ident::new("exec", Span::mixed_site());
    let (args_type, args_item, unpack) = match arguments {
        Arguments::Struct(ty) => (quote!(#ty), None, None),
        Arguments::Fields(fields) => {
            let args_ident = Ident::new("__DshToolArgs", Span::mixed_site());
            let field_tokens = fields.iter().map(|Field { ident, ty, attrs }| {
                quote! { #(#attrs)* #ident: #ty }
            });
            let idents: Vec<&Ident> = fields.iter().map(|f| &f.ident).collect();
            let serde_crate = format!("{}::serde", quote!(#private)).replace(' ', "");
            let schemars_crate = format!("{}::schemars", quote!(#private)).replace(' ', "");
            let item = quote! {
                #[derive(#private::serde::Deserialize, #private::schemars::JsonSchema)]
                #[serde(crate = #serde_crate, deny_unknown_fields)]
                #[schemars(crate = #schemars_crate)]
                // `pub` because it is the `Args` of a trait impl for a type that may be public;
                // inside `const _` it cannot be named from outside all the same.
                #[allow(unreachable_pub, missing_docs)]
                pub struct #args_ident {
                    #(#field_tokens,)*
                }
            };
            let unpack = quote! { let #args_ident { #(#idents,)* } = #args_param; };
            (quote!(#args_ident), Some(item), Some(unpack))
        }
    };
    let call_args = sources.iter().map(|source| match source {
        Source::Field(ident) => quote!(#ident),
        Source::Args => quote!(#args_param),
        Source::Exec { by_ref: false } => quote!(#exec_param),
        Source::Exec { by_ref: true } => quote!(&#exec_param),
    });
    let output_ty = &output.ty;
    let output_span = output_ty.span();
    let call = quote! { #fn_ident(#(#call_args),*).await };
    let body = if output.fallible {
        quote_spanned! {output_span=> ::core::result::Result::Ok(#call?) }
    } else {
        quote! { ::core::result::Result::Ok(#call) }
    };
    let output_item = quote_spanned! {output_span=> type Output = #output_ty; };
    let render = match &options.render {
        Some(path) => quote! { #path(args, value) },
        None => quote! {
            let _ = args;
            // The default rendering reads the value's JSON: a string is its text, anything
            // else compact JSON. Serialising an accepted value again cannot fail.
            #private::render_value(&#private::serde_json::to_value(value).unwrap_or_default())
        },
    };
    let timeout = options.timeout_ms.as_ref().map(|ms| {
        quote! {
            fn timeout(&self) -> ::core::option::Option<::core::time::Duration> {
                ::core::option::Option::Some(::core::time::Duration::from_millis(#ms))
            }
        }
    });
    let concurrency = options.concurrency_safe.map(|span| {
        quote_spanned! {span=>
            fn is_concurrency_safe(&self, _: &Self::Args) -> bool {
                true
            }
        }
    });
    let fn_item = function;

    quote! {
        #fn_item

        #[doc = #struct_doc]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #struct_ident;

        const _: () = {
            #args_item

            impl #krate::Tool for #struct_ident {
                type Args = #args_type;
                #output_item

                fn name(&self) -> &str {
                    #tool_name
                }

                fn description(&self) -> &str {
                    #description
                }

                async fn execute(
                    &self,
                    #args_param: Self::Args,
                    #exec_param: #krate::ExecContext,
                ) -> ::core::result::Result<Self::Output, #krate::ToolError> {
                    let _ = &#exec_param;
                    #unpack
                    #body
                }

                fn render(&self, args: &Self::Args, value: &Self::Output) -> ::std::vec::Vec<#krate::ContentBlock> {
                    #render
                }

                #timeout
                #concurrency
            }
        };
    }
}
