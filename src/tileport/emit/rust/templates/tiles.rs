// Device helpers of the idiomatic rendering (tileport.emit.rust.idiom), read by tileport.emit.rust.lowering
// (TILE_HELPERS): the generated crate's `tiles` module holds the ones its kernels call, once, each named by
// its function. Each compiles to the Tile IR of the spelling it replaces (docs/translator.md). One blank line
// separates them; none holds a blank line.

    /// The tiles of `x` as `ct.load` reads them by default: no padding value.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn view<'a, E: ElementType, const S: [i32; N], const R: [i32; N]>(
        x: &'a Tensor<E, S>,
        shape: Shape<R>,
    ) -> Partition<'a, E, R> {
        let token: Token = get_tensor_token(x);
        // SAFETY: a read-only view that starts from the tensor's ordering token, as `Tensor::partition`.
        let p: Partition<E, R> = unsafe { make_partition_view(x, shape, padding::None, dim_map::Identity, token) };
        p
    }

    /// The tiles of `x`, read past its end as -inf (`padding_mode=NEG_INF`).
    #[cuda_tile::variadic_op(N = 6)]
    pub fn view_neg_inf<'a, E: ElementType, const S: [i32; N], const R: [i32; N]>(
        x: &'a Tensor<E, S>,
        shape: Shape<R>,
    ) -> Partition<'a, E, R> {
        let token: Token = get_tensor_token(x);
        // SAFETY: as `view`.
        let p: Partition<E, R> = unsafe { make_partition_view(x, shape, padding::NegInf, dim_map::Identity, token) };
        p
    }

    /// The tiles of `x`, read past its end as +inf (`padding_mode=POS_INF`).
    #[cuda_tile::variadic_op(N = 6)]
    pub fn view_pos_inf<'a, E: ElementType, const S: [i32; N], const R: [i32; N]>(
        x: &'a Tensor<E, S>,
        shape: Shape<R>,
    ) -> Partition<'a, E, R> {
        let token: Token = get_tensor_token(x);
        // SAFETY: as `view`.
        let p: Partition<E, R> = unsafe { make_partition_view(x, shape, padding::PosInf, dim_map::Identity, token) };
        p
    }

    /// The tiles of `x`, read past its end as NaN (`padding_mode=NAN`).
    #[cuda_tile::variadic_op(N = 6)]
    pub fn view_nan<'a, E: ElementType, const S: [i32; N], const R: [i32; N]>(
        x: &'a Tensor<E, S>,
        shape: Shape<R>,
    ) -> Partition<'a, E, R> {
        let token: Token = get_tensor_token(x);
        // SAFETY: as `view`.
        let p: Partition<E, R> = unsafe { make_partition_view(x, shape, padding::Nan, dim_map::Identity, token) };
        p
    }

    /// The tiles of `x`, read past its end as -0.0 (`padding_mode=NEG_ZERO`).
    #[cuda_tile::variadic_op(N = 6)]
    pub fn view_neg_zero<'a, E: ElementType, const S: [i32; N], const R: [i32; N]>(
        x: &'a Tensor<E, S>,
        shape: Shape<R>,
    ) -> Partition<'a, E, R> {
        let token: Token = get_tensor_token(x);
        // SAFETY: as `view`.
        let p: Partition<E, R> = unsafe { make_partition_view(x, shape, padding::NegZero, dim_map::Identity, token) };
        p
    }

    /// The tiles of an output `y` that several tile blocks write, as `ct.store` writes them.
    ///
    /// The crate's kernels keep cuTile Python's contract: the tile blocks of a launch write disjoint
    /// tiles (the launchers also check that an output's elements do not overlap).
    #[cuda_tile::variadic_op(N = 6)]
    pub fn view_mut<'a, E: ElementType, const S: [i32; N], const R: [i32; N]>(
        y: &'a Tensor<E, S>,
        shape: Shape<R>,
    ) -> PartitionMut<'a, E, R> {
        // SAFETY: the tile blocks write disjoint tiles (above); the view has no padding, as `ct.store`'s.
        let p: PartitionMut<E, R> = unsafe { y.partition_full_mut(shape) };
        p
    }

    /// `ct.load` with the default memory modes: the tile at `index` of `view`.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn load<E: ElementType, const S: [i32; N]>(view: &Partition<E, S>, index: [i32; N]) -> Tile<E, S> {
        let tile: Tile<E, S> = load_view_tko(view, index, ordering::Weak, scope::TileBlock, None, tma::Enabled);
        tile
    }

    /// `ct.astype(ct.load(..), ct.float32)`: the tile at `index` of `view` (as `load`), converted to f32.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn load_f32<E: ElementType, const S: [i32; N]>(view: &Partition<E, S>, index: [i32; N]) -> Tile<f32, S> {
        let tile: Tile<E, S> = load_view_tko(view, index, ordering::Weak, scope::TileBlock, None, tma::Enabled);
        let wide: Tile<f32, S> = convert_tile(tile);
        wide
    }

    /// `ct.store(y, .., tile=ct.astype(tile, y.dtype))` of an output the tile block owns: `tile` cast to the
    /// output's element type, stored by `Tensor::store` at the block's own tile.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn store_cast<E: ElementType, F: ElementType, const S: [i32; N]>(y: &mut Tensor<E, S>, tile: Tile<F, S>) {
        let cast: Tile<E, S> = convert_tile(tile);
        y.store(cast);
    }

    /// `ct.store` with the default memory modes: `tile` at `index` of `view` (a `view_mut`).
    #[cuda_tile::variadic_op(N = 6)]
    pub fn store<E: ElementType, const S: [i32; N]>(view: &mut PartitionMut<E, S>, tile: Tile<E, S>, index: [i32; N]) {
        // SAFETY: `view` is a `view_mut`, whose tiles the tile blocks write disjointly.
        unsafe { store_view_tko_mut(view, tile, index, ordering::Weak, scope::TileBlock, None, tma::Enabled) };
    }

    /// `ct.load(.., allow_tma=False)`: the tile at `index` of `view`, without the TMA engine.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn load_no_tma<E: ElementType, const S: [i32; N]>(view: &Partition<E, S>, index: [i32; N]) -> Tile<E, S> {
        let tile: Tile<E, S> = load_view_tko(view, index, ordering::Weak, scope::TileBlock, None, tma::Disabled);
        tile
    }

    /// `ct.astype(ct.load(.., allow_tma=False), ct.float32)`: as `load_no_tma`, converted to f32.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn load_no_tma_f32<E: ElementType, const S: [i32; N]>(view: &Partition<E, S>, index: [i32; N]) -> Tile<f32, S> {
        let tile: Tile<E, S> = load_view_tko(view, index, ordering::Weak, scope::TileBlock, None, tma::Disabled);
        let wide: Tile<f32, S> = convert_tile(tile);
        wide
    }

    /// `ct.store(.., allow_tma=False)`: `tile` at `index` of `view` (a `view_mut`), without the TMA engine.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn store_no_tma<E: ElementType, const S: [i32; N]>(
        view: &mut PartitionMut<E, S>,
        tile: Tile<E, S>,
        index: [i32; N],
    ) {
        // SAFETY: as `store`.
        unsafe { store_view_tko_mut(view, tile, index, ordering::Weak, scope::TileBlock, None, tma::Disabled) };
    }

    /// `ct.load` ordered after the access `token` completes (the same array written before it): the tile at
    /// `index` of `view` and the load's own token; `inbounds` holds cuTile's `false` per index.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn load_after<E: ElementType, const S: [i32; N]>(
        view: &Partition<E, S>,
        index: [i32; N],
        token: Token,
        inbounds: [bool; N],
    ) -> (Tile<E, S>, Token) {
        let shape: Shape<S> = Shape::<S> { dims: &[] };
        // SAFETY: a view load, ordered after `token`: its lanes past the array read as the view's padding.
        let loaded: (Tile<E, S>, Token) = unsafe {
            load_view_raw(view, index, Some(token), ordering::Weak, scope::TileBlock, tma::Enabled, None, inbounds, shape)
        };
        loaded
    }

    /// `ct.store` ordered after the access `token` completes (the same array read or written before it): `tile`
    /// at `index` of `view`, returning the store's token; `inbounds` holds cuTile's `false` per index.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn store_after<E: ElementType, const S: [i32; N]>(
        view: &Partition<E, S>,
        tile: Tile<E, S>,
        index: [i32; N],
        token: Token,
        inbounds: [bool; N],
    ) -> Token {
        // SAFETY: the tile blocks write disjoint tiles (see `view_mut`), each store ordered after `token`.
        let done: Token = unsafe {
            store_view_raw(view, tile, index, Some(token), ordering::Weak, scope::TileBlock, tma::Enabled, None, inbounds)
        };
        done
    }

    /// `ct.store(.., allow_tma=False)` ordered after the access `token` completes: as `store_after`, without the
    /// TMA engine.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn store_after_no_tma<E: ElementType, const S: [i32; N]>(
        view: &Partition<E, S>,
        tile: Tile<E, S>,
        index: [i32; N],
        token: Token,
        inbounds: [bool; N],
    ) -> Token {
        // SAFETY: as `store_after`.
        let done: Token = unsafe {
            store_view_raw(view, tile, index, Some(token), ordering::Weak, scope::TileBlock, tma::Disabled, None, inbounds)
        };
        done
    }

    /// `ct.exp(x, rounding_mode=APPROX)` on f32 tiles.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn exp_approx<const S: [i32; N]>(x: Tile<f32, S>) -> Tile<f32, S> {
        // SAFETY: f32 with approximate rounding is a pair Tile IR supports.
        let y: Tile<f32, S> = unsafe { exp_with_rounding(x, rounding::Approx) };
        y
    }

    /// `ct.tanh(x, rounding_mode=APPROX)` on f32 tiles.
    #[cuda_tile::variadic_op(N = 6)]
    pub fn tanh_approx<const S: [i32; N]>(x: Tile<f32, S>) -> Tile<f32, S> {
        // SAFETY: f32 with approximate rounding is a pair Tile IR supports.
        let y: Tile<f32, S> = unsafe { tanh_with_rounding(x, rounding::Approx) };
        y
    }
